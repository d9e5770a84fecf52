// The floor of the fleet scenario (docs/performance.md, stop 46): what reading N agent TUIs
// costs a program that does nothing else. N `maxx-bench child-agent`s on PTYs (forkpty, 120x40),
// one edge-triggered epoll over the masters; each readiness is read until EAGAIN (MODE 0) or
// with FIONREAD and an exact read (MODE 1, like maxx's armed read). Prints this process's CPU
// seconds per session per minute over SECS seconds, after 3 s of warm-up.
//
//   cc -O2 -o /tmp/floor bench/floor/floor.c -lutil
//   /tmp/floor 1000 15 0 bench/target/release/maxx-bench
#define _GNU_SOURCE
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <errno.h>
#include <string.h>
#include <signal.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static double cpu(){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
int main(int argc,char**argv){
  if(argc<5){fprintf(stderr,"usage: floor N SECS MODE MAXX_BENCH\n");return 2;}
  int n=atoi(argv[1]); int secs=atoi(argv[2]); int mode=atoi(argv[3]); const char*agent=argv[4];
  char gate[]="/tmp/maxx-floor-XXXXXX"; mkdtemp(gate); strcat(gate,"/g"); mkfifo(gate,0600);
  int gfd=open(gate,O_RDWR|O_CLOEXEC);
  int ep=epoll_create1(0);
  struct winsize ws={40,120,0,0};
  char life[16]; snprintf(life,16,"%d",secs+40);
  pid_t *pids=calloc(n,sizeof(pid_t));
  for(int i=0;i<n;i++){
    int m; pid_t p=forkpty(&m,NULL,NULL,&ws);
    if(p==0){char s[16];snprintf(s,16,"%d",i+1);execl(agent,"maxx-bench","child-agent",s,life,gate,(char*)0);_exit(1);}
    pids[i]=p;
    fcntl(m,F_SETFL,fcntl(m,F_GETFL)|O_NONBLOCK);
    struct epoll_event e={.events=EPOLLIN|EPOLLET,.data.fd=m}; epoll_ctl(ep,EPOLL_CTL_ADD,m,&e);
  }
  sleep(1); close(gfd);
  static char buf[65536]; struct epoll_event ev[1024];
  double t0=now(), c0=0; int started=0; long wakes=0, reads=0;
  for(;;){
    double t=now();
    if(!started && t-t0>3){started=1;c0=cpu();t0=t;wakes=0;reads=0;}
    if(started && t-t0>secs) break;
    int k=epoll_wait(ep,ev,1024,1000); wakes++;
    for(int j=0;j<k;j++){int fd=ev[j].data.fd;
      for(;;){ ssize_t r;
        if(mode==1){int a=0; ioctl(fd,FIONREAD,&a); if(a==0)break; if(a>65536)a=65536; r=read(fd,buf,a); reads++; if(r<=0)break; if(r==a) break;}
        else { r=read(fd,buf,sizeof buf); reads++; if(r<=0) break; }
      }}
  }
  double c=cpu()-c0, el=now()-t0;
  printf("floor mode %d: %.4f CPU-s/session/min; epoll_waits/redraw %.3f reads/redraw %.3f\n",mode,c/n*60/el, wakes/(n*20.0*el), reads/(n*20.0*el));
  for(int i=0;i<n;i++) kill(pids[i],SIGKILL);
  return 0;
}
